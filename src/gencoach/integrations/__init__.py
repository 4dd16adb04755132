"""Third-party simulators run under gencoach: `gymnasium` (any env), `minigrid` (BabyAI).

Each subpackage imports its simulator only when imported itself, so gencoach without the
`gym` extra never needs gymnasium or minigrid.
"""
