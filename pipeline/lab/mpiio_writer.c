/*
 * mpiio_writer: the incident lab's multi-process MPI-IO job.
 *
 * Usage: mpiio_writer --iterations N --block-kib B [--pause-ms P] DIR_0 DIR_1 ... DIR_{n-1}
 *
 * Rank r writes DIR_{r % n}/mpiio.<r>.dat through MPI-IO: N times one block of B KiB at offset
 * i*B KiB, each followed by MPI_File_sync (and a pause of P ms), so every iteration reaches the
 * device and a slow device makes the ranks writing to it slow. After a barrier rank 0 prints one line per rank:
 *
 *     rank=<r> seconds=<open..close wall time, s> dir=<DIR_{r % n}>
 *
 * Run it under LD_PRELOAD=libdarshan.so to get a Darshan log of the job. Bad arguments: usage
 * on stderr (rank 0), exit status 2.
 */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_BLOCK_KIB (1024L * 1024L) /* 1 GiB: keeps the byte count of one write in an int */

static const char usage[] =
    "usage: mpiio_writer --iterations N --block-kib B [--pause-ms P] DIR_0 [DIR_1 ...]\n"
    "  each rank r writes N blocks of B KiB to DIR_{r % n}/mpiio.<r>.dat, syncing each\n"
    "  and pausing P ms (default 0) after each\n";

static long pause_ms = 0; /* after each write and sync: a paced job shares its LUNs */

/* Parse a decimal integer in [1, max]; return 0 if text is not one. */
static long parse_count(const char *text, long max)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || value < 1 || value > max)
        return 0;
    return value;
}

/* Fill *iterations, *block_kib and *first_dir from argv; return 0 on success, -1 on bad usage. */
static int parse_args(int argc, char **argv, long *iterations, long *block_kib, int *first_dir)
{
    *iterations = 0;
    *block_kib = 0;
    int i = 1;
    for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (strcmp(argv[i], "--iterations") == 0)
            *iterations = parse_count(argv[i + 1], INT_MAX);
        else if (strcmp(argv[i], "--block-kib") == 0)
            *block_kib = parse_count(argv[i + 1], MAX_BLOCK_KIB);
        else if (strcmp(argv[i], "--pause-ms") == 0) {
            pause_ms = strcmp(argv[i + 1], "0") == 0 ? 0 : parse_count(argv[i + 1], 60000);
            if (pause_ms == 0 && strcmp(argv[i + 1], "0") != 0)
                return -1;
        }
        else
            return -1;
    }
    *first_dir = i;
    return (*iterations > 0 && *block_kib > 0 && i < argc) ? 0 : -1;
}

/* Abort the job with a message if an MPI call failed. */
static void check(int rc, const char *what, const char *path)
{
    if (rc == MPI_SUCCESS)
        return;
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(rc, message, &length);
    fprintf(stderr, "mpiio_writer: %s %s: %s\n", what, path, message);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Wait for a non-blocking collective without spinning: MPICH polls shared memory in blocking
 * collectives, which keeps a core busy for as long as the slowest rank writes; the lab's other
 * processes need that core. */
static void wait_idle(MPI_Request *req)
{
    int done = 0;
    const struct timespec pause = {0, 10 * 1000 * 1000}; /* 10 ms */
    for (;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        nanosleep(&pause, NULL);
    }
}

/* Write the rank's file; return the wall time from open to close in seconds. */
static double write_file(const char *path, long iterations, long block_kib)
{
    int block_bytes = (int)(block_kib * 1024);
    char *block = malloc((size_t)block_bytes);
    if (block == NULL) {
        fprintf(stderr, "mpiio_writer: cannot allocate %d bytes\n", block_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(block, 'x', (size_t)block_bytes);

    double started = MPI_Wtime();
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_SELF, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                        &fh),
          "open", path);
    for (long i = 0; i < iterations; i++) {
        MPI_Offset offset = (MPI_Offset)i * block_bytes;
        check(MPI_File_write_at(fh, offset, block, block_bytes, MPI_BYTE, MPI_STATUS_IGNORE),
              "write", path);
        check(MPI_File_sync(fh), "sync", path);
        if (pause_ms > 0) {
            const struct timespec pause = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
            nanosleep(&pause, NULL);
        }
    }
    check(MPI_File_close(&fh), "close", path);
    double seconds = MPI_Wtime() - started;
    free(block);
    return seconds;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long iterations = 0, block_kib = 0;
    int first_dir = 0;
    if (parse_args(argc, argv, &iterations, &block_kib, &first_dir) != 0) {
        if (rank == 0)
            fputs(usage, stderr);
        MPI_Finalize();
        return 2;
    }
    int ndirs = argc - first_dir;
    const char *dir = argv[first_dir + rank % ndirs];
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/mpiio.%d.dat", dir, rank) >= (int)sizeof path) {
        fprintf(stderr, "mpiio_writer: path too long under %s\n", dir);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    double seconds = write_file(path, iterations, block_kib);
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait_idle(&req);

    double *all = rank == 0 ? malloc(sizeof(double) * (size_t)size) : NULL;
    if (rank == 0 && all == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Igather(&seconds, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req);
    wait_idle(&req);
    if (rank == 0) {
        for (int r = 0; r < size; r++)
            printf("rank=%d seconds=%.6f dir=%s\n", r, all[r], argv[first_dir + r % ndirs]);
        free(all);
    }
    MPI_Finalize();
    return 0;
}
