"""The planners' former import path (`from mindstore.model import planner`), kept for code
written against it: everything is in `mindstore.model.plans`."""

from mindstore.model.plans import *  # noqa: F403
from mindstore.model.plans import __all__ as __all__
