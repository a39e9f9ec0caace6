"""One cog per feature; each callback hands its work to felab_bot/<feature>.py."""
