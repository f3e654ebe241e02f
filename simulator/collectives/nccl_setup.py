"""What decides the collectives a job's NCCL runs: its environment (NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE,
channel limits, ...), its release (which algorithms it offers, and the tuner whose choice it makes) and
whose choice of algorithm and protocol a prediction takes: the pair the cost model prices fastest
('model') or the pair that release's tuner ranks first ('nccl'; simulator.collectives.select)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simulator.collectives.comm import CommView
from simulator.collectives.cost import CollectiveEstimate
from simulator.collectives.deepep import deepep_estimate
from simulator.collectives.params import ModelParams, prior_params
from simulator.collectives.predict import predict_collective


@dataclass(frozen=True)
class NcclSetup:
    """A job's NCCL: environment variables, release (major, minor; None: the newest modelled) and selection
    (None: not stated, the model's own choice, or with a calibration profile the choice its fit priced)."""

    env: tuple[tuple[str, str], ...] = ()
    release: tuple[int, int] | None = None
    selection: str | None = None

    @classmethod
    def of(cls, env: Mapping[str, str] | None = None, release: tuple[int, int] | None = None,
           selection: str | None = None) -> NcclSetup:
        """A setup from an environment mapping (None: empty), a release and a selection."""
        return cls(tuple(sorted((env or {}).items())), release, selection)

    @property
    def env_map(self) -> dict[str, str]:
        """The environment as predict_collective takes it."""
        return dict(self.env)

    def predict(self, view: CommView, op: str, size_bytes: int, params: ModelParams | None = None,
                repeat: int = 1) -> CollectiveEstimate:
        """One collective on `view` as this NCCL runs it (predict_collective), one of `repeat` back-to-back."""
        return predict_collective(view, op, size_bytes, env=self.env_map, params=params, nccl_release=self.release,
                                  selection=self.selection or "model", repeat=repeat)

    def predict_deepep(self, view: CommView, size_bytes: int, top_k: int,
                       params: ModelParams | None = None) -> CollectiveEstimate:
        """One DeepEP dispatch or combine (simulator.collectives.deepep) on `view`, with this NCCL's all-to-all
        latency there; `size_bytes` is what the rank would send in NCCL's all-to-all."""
        nccl = self.predict(view, "alltoall", size_bytes, params)
        if view.n_ranks == 1:
            return nccl
        return deepep_estimate(view, size_bytes, top_k, params if params is not None else prior_params(view),
                               nccl.latency_s)


DEFAULT_NCCL = NcclSetup()
