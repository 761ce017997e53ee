"""lockstep_train: live rank migration for data-parallel PyTorch training.

    import lockstep_train as ls
    job = ls.join()
    ddp = DistributedDataParallel(model, process_group=job.ddp_group)   # the user's own wrapper
    job.track(ddp, optimizer)
    for step in job.steps(total):
        with job.step_guard():
            ls.seed(step, job.rank)
            loss = loss_fn(ddp(*batch_for(step, job.rank)))
            loss.backward()
            optimizer.step(); optimizer.zero_grad()

(A plain module works too: then the loop calls job.all_reduce_gradients() after backward.)

See python/README.md and docs/migration.md.
"""
__version__ = "0.1.0"

from .client import CoordinatorClient, Unavailable
from .job import Exit, Job, JobFailed, JoinError, UsageError, join, seed
from .protocol import Directive, Plan, ProtocolError, parse_directive, parse_plan
from .reduce import GradientReducer
from .seeding import derive_seed
from ._torch_private import UnsupportedTorch
from .wrappers import UnsupportedWrapper
from .sharded import UnsupportedLayout

__all__ = ["__version__", "join", "seed", "Job", "Exit", "JobFailed", "JoinError", "GradientReducer",
           "CoordinatorClient", "Unavailable", "Plan", "Directive", "ProtocolError", "parse_plan", "parse_directive",
           "derive_seed", "UnsupportedWrapper", "UnsupportedLayout", "UnsupportedTorch", "UsageError"]
