"""How MOLAR (``formulations.molar``) is solved: its algorithm from per-task fits to thresholds
(``estimate``), the weighted median's method table (``methods``), and the paper's LASSO-debias
baselines and high-dimensional variant (``lasso_debias``)."""
