"""Record types that cross stages: what a decoder gives its reducers and a reducer its encoder,
so that no stage imports its producer's module for a type."""
