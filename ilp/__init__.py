from .cost import Choice, Cost, process_cost
from .budget import Budget
from .candidates import candidates
from .model import estimate
from .solve import Solution, solve

__all__ = ["Budget", "Choice", "Cost", "Solution", "candidates", "estimate", "process_cost", "solve"]
