"""How ARMUL (``formulations.armul``) is solved: its method table (``methods``), proximal gradient
and the alternating searches (``prox``, on ``glm``'s per-task fits), the exact Pyomo model on a
backend (``scip``), and clustered ARMUL's branch and bound over assignments (``tree``)."""
