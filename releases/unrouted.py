"""The unrouted share of a model's traffic, pure (no ORM, no network, no clock).

A release protects only the requests that pass through the router's HTTP split (the
unversioned `POST /v2/models/<m>/infer` on the router's HTTP port). Triton also answers
gRPC calls (through the router's gRPC port, which nginx passes through unsplit, or straight
to a node), HTTP calls made straight to a node and calls that name a version: those get
whatever they ask for, and unversioned ones Triton's highest READY version (the candidate
as soon as it is loaded, whatever the step). The unrouted share is the part of Triton's
requests for the model (its counters, summed over nodes) that the router's split did not
count over the same window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

UNPROTECTED = (
    "gRPC clients (through the router's gRPC port or straight to a node), HTTP clients "
    "calling a node directly, and clients that name a version"
)


def unrouted_share(triton_requests: float, split_requests: float) -> float | None:
    """(Triton's requests - the split's) / Triton's, within [0, 1]; None with no request.

    The router can count a little more than Triton over the same window (a request logged
    just inside it that Triton counted just before, or one nginx answered itself): that is
    0, never a negative share.
    """
    if triton_requests <= 0:
        return None
    unrouted = max(0.0, float(triton_requests) - max(0.0, float(split_requests)))
    return min(1.0, unrouted / float(triton_requests))


@dataclass(frozen=True)
class UnroutedMeasure:
    """One measurement of a model's unrouted share over a window."""

    triton_requests: int  # Triton's counters, summed over nodes and versions
    split_requests: int  # the router's HTTP split (its access log)
    share: float | None  # None: Triton counted no request
    window_start: float | None = None  # epoch seconds the window covers
    window_end: float | None = None
    grpc_via_router: int | None = None  # gRPC infer calls through the router, all models
    versioned_via_router: int | None = None  # HTTP calls through the router naming a version
    why: str = ""  # why there is no share, when that is not the lack of traffic

    @classmethod
    def of(cls, triton_requests: float, split_requests: float, **extra) -> UnroutedMeasure:
        return cls(
            triton_requests=int(triton_requests),
            split_requests=int(split_requests),
            share=unrouted_share(triton_requests, split_requests),
            **extra,
        )

    @property
    def share_percent(self) -> str:
        """'12.5%', or '' when not measured."""
        return "" if self.share is None else percent(self.share)

    @property
    def unrouted_requests(self) -> int:
        return max(0, self.triton_requests - self.split_requests)

    def to_json(self) -> dict:
        """What a release stores and the API shows, with the sentence the console shows."""
        return {
            **asdict(self),
            "unrouted_requests": self.unrouted_requests,
            "share_percent": self.share_percent,
            "text": self.text(),
        }

    def text(self) -> str:
        """The measurement in words, naming the clients it leaves unprotected."""
        if self.share is None:
            return self.why or "Not measured: Triton counted no request for the model."
        if self.unrouted_requests == 0:
            return (
                f"All {self.triton_requests} requests Triton counted went through the "
                "router's HTTP split."
            )
        return (
            f"{percent(self.share)} of {self.triton_requests} requests "
            f"({self.unrouted_requests}) did not go through the router's HTTP split: "
            f"{UNPROTECTED}. The release does not protect them."
        )


def exceeds(measure: UnroutedMeasure | None, *, max_share: float, min_requests: int) -> bool:
    """True when the measured share is above `max_share` on at least `min_requests` of
    Triton's requests (less traffic than that says too little to refuse a release on)."""
    return (
        measure is not None
        and measure.share is not None
        and measure.triton_requests >= min_requests
        and measure.share > max_share
    )


def percent(share: float) -> str:
    """0.125 -> '12.5%' (one decimal at most)."""
    return f"{share * 100:.1f}".removesuffix(".0") + "%"
