"""idgen for Python 3.11 and later, standard library only: IDs from an `idgen serve` over
HTTP (`Client`), and Snowflake IDs made in this process on a worker number leased through
the service's lease API (`LeasedGenerator`), which stops before the lease could pass on."""

from ._client import Client, IdgenError, Response
from ._clock import Clock, SystemClock
from ._leased import LeasedGenerator
from ._types import Decoded, ErrorCode, Kind, LeaseTerms, Layout, State

__all__ = [
    "Client",
    "Clock",
    "Decoded",
    "ErrorCode",
    "IdgenError",
    "Kind",
    "LeaseTerms",
    "LeasedGenerator",
    "Layout",
    "Response",
    "State",
    "SystemClock",
]
__version__ = "0.1.0"
