"""lockstep_train: live rank migration for data-parallel PyTorch training.

    import lockstep_train as ls
    job = ls.join()
    job.track(model, optimizer)
    for step in job.steps(total):
        with job.step_guard():
            ls.seed(step, job.rank)
            loss = loss_fn(model(*batch_for(step, job.rank)))
            loss.backward()
            job.all_reduce_gradients()
            optimizer.step(); optimizer.zero_grad()

See python/README.md and docs/migration.md.
"""
__version__ = "0.1.0"

from .client import CoordinatorClient, Unavailable
from .job import Exit, Job, JobFailed, JoinError, join, seed
from .protocol import Directive, Plan, ProtocolError, parse_directive, parse_plan
from .reduce import GradientReducer
from .seeding import derive_seed

__all__ = ["__version__", "join", "seed", "Job", "Exit", "JobFailed", "JoinError", "GradientReducer",
           "CoordinatorClient", "Unavailable", "Plan", "Directive", "ProtocolError", "parse_plan", "parse_directive",
           "derive_seed"]
