"""Spaced-repetition drills (FSRS) and say-it-aloud answers."""
