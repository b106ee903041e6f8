"""How the sparse multi-task problem (``formulations.sparse``) is solved: its method table
(``methods``), block coordinate descent with local search (``bcd``), outer approximation on a
MILP master (``oa``: multi-tree, and the Big-M MIQP; ``oa_scip``: single-tree in SCIP), and our
branch and bound over supports (``bnb``, with ``lbfgsb`` for its Zbar climbs)."""
