"""One cog per feature; each callback hands its work to bot/<feature>.py."""
