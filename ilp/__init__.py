from .cost import Choice, Cost, process_cost
from .budget import Budget
from .solve import Solution, candidates, estimate, solve

__all__ = ["Budget", "Choice", "Cost", "Solution", "candidates", "estimate", "process_cost", "solve"]
