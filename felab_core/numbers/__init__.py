"""Members' writing speeds, entered or measured, against the speed limit of their machine."""
