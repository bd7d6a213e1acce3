"""The incident lab: a small real storage system, broken on purpose."""
