"""HOW the problems of ``formulations`` are solved, laid out as the architecture is:

    backends/     one adapter per solver (HiGHS, SCIP, Gurobi) behind one interface
    engine/       the branch-and-bound engine both trees run on (serial, local workers, Dask)
    sparse/       the sparse multi-task methods: bcd, outer approximation, the MIQP, bnb
    armul/        ARMUL's methods: proximal gradient, the exact model, clustered ARMUL's tree
    molar/        MOLAR's algorithm, its weighted-median methods, the LASSO-debias baselines

and, shared by the families: ``method`` (a method table's row, SolverRun, the one status rule),
``options`` (SolveOptions), ``progress`` (the live log), ``user_model`` (an edited Pyomo model,
solved and certified) and ``least_squares`` (per-task OLS)."""
