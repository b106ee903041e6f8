"""The largest counts mtl_opt runs: a count beyond them is a typo or a runaway, not an experiment.

One place: the CLI's count flags (``argtypes.count``), experiment files' [run] keys and the
API (``bench.runner.plan``, ``bandits.runner.run_bandit``, ``collab.runner.run_methods``) all
check against these, and ``--help`` states them.  Nothing is imported here, so the CLI's
parsers can use them without loading numpy.
"""

#: Repetitions: ``bench --repeats`` (each repeat is one more cell, a process of its own that takes
#: over a second to start, per instance and solver), bandit ``trials`` and collab ``runs`` (each a
#: whole run of the horizon).  Timing and Monte Carlo statistics need far fewer; the shipped
#: experiments use 2-10.  ``--repeats 1000000000`` planned a billion cells and never started.
MAX_REPEATS = 1000

#: Bandit rounds and collab steps (``horizon``).  Every round is a Python step of each policy
#: (tens of microseconds to milliseconds), so 10^6 rounds are minutes to hours per trial; the
#: shipped experiments use 1000-3000.
MAX_HORIZON = 10**6
