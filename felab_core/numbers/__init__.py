"""Members' writing speeds, typed in or measured by felab, checked against physics.

A typed figure is read strictly (a positive, finite number in a unit that means tokens per
second), stored as "entered", and set beside the speed limit of the member's machine for the
model file that server runs (felab_core.sizing.speed_limit owns that formula). A figure from a
felab benchmark job (sent by a worker, or imported from the results CSV `felab bench` wrote) is
stored as "measured" with its preset and model, so that only like runs are compared. The day's
"done when" counts measured figures only.

One module per concern: `speeds` reads a typed figure, `recording` stores one (typed or from a
job), `progress` adds them up for a course day, `importing` reads `felab bench`'s results CSV,
`verdict` judges a measured figure before it can rank.
"""
