from .cost import Choice, Cost, process_cost
from .solve import Budget, Solution, candidates, estimate, solve

__all__ = ["Budget", "Choice", "Cost", "Solution", "candidates", "estimate", "process_cost", "solve"]
