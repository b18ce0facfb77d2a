"""The shapes of the service's JSON answers."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

Kind = Literal["snowflake", "uuidv7", "ulid"]
ErrorCode = Literal["http", "expired", "lost", "not-yet", "clock-behind", "closed"]
State = Literal["valid", "expired", "lost", "closed"]


class Layout(TypedDict):
    """The layout the service's Snowflake IDs follow (`GET /v1/layout`)."""

    timeBits: int
    datacenterBits: int
    workerBits: int
    sequenceBits: int
    epoch: str
    lifetimeYears: float
    lastInstant: str
    datacenters: int
    workersPerDatacenter: int
    nodes: int
    idsPerSecondPerNode: int
    clusterIdsPerSecond: int


class Decoded(TypedDict):
    """What an ID says (`GET /v1/ids/{id}/decode`)."""

    id: str
    kind: Kind
    createdAt: str
    datacenter: NotRequired[int]
    worker: NotRequired[int]
    sequence: NotRequired[int]
    opaque: NotRequired[str]


class LeaseTerms(TypedDict):
    """The terms of a leased worker number (`POST /v1/generators/lease`)."""

    leaseId: str
    datacenter: int
    worker: int
    ttlMs: int
    resumeAfterMs: int
    validUntilMs: int
    renewEveryMs: int
    serverNowMs: int
    layout: Layout
