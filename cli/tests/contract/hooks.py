"""The one rule of the service that its OpenAPI document cannot state (query parameters
have no "if this, then that"): `form=opaque` is for Snowflake IDs only, so a request pairing
it with another kind is refused (400), as the parameter's description says. Requests of
that pair are left out of the run; every other one the document allows must be accepted.
cli/tests/contract/run loads this file (SCHEMATHESIS_HOOKS=hooks)."""

import schemathesis
from hypothesis.internal import lambda_sources

# Hypothesis names each filter in a strategy's description by parsing the source of the
# lambda it is given; on this machine's CPython 3.11 parsing schemathesis's largest module
# there can raise "SystemError: AST constructor recursion depth mismatch", which stops the
# run with a runtime error of the tool, not of the service. A name is only a description:
# an unknown one is what hypothesis itself gives when it cannot tell.
_describe_lambda = lambda_sources.lambda_description


def _lambda_description_or_unknown(f):
    try:
        return _describe_lambda(f)
    except SystemError:
        return "lambda: <unknown>"


lambda_sources.lambda_description = _lambda_description_or_unknown


@schemathesis.hook
def filter_case(context, case):
    if case.operation.path != "/v1/ids":
        return True
    fields = case.query if case.method.upper() == "GET" else case.body
    if not isinstance(fields, dict):
        return True
    kind = fields.get("kind", "snowflake")
    return not (fields.get("form") == "opaque" and kind != "snowflake")
