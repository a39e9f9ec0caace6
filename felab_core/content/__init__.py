"""Course content as files: the pack format, the loader that checks it, the day calendar."""
