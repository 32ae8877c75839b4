"""Before a run spends anything: is every configured endpoint reachable and accepting the key?

Uses the free ``GET /models`` request; a server that does not implement it (404) still counts as
reachable. Raises a UserError with one sentence saying what to do.
"""

from __future__ import annotations

import asyncio

from accelopt.errors import UserError
from accelopt.llm.config import Endpoint

HOW = "configure one in accelopt.yaml (see accelopt.example.yaml) or set ACCELOPT_LLM_BASE_URL"


async def _probe(endpoint: Endpoint, timeout_s: float) -> None:
    import openai  # here, not when the command line starts

    client = openai.AsyncOpenAI(
        base_url=endpoint.base_url, api_key=endpoint.api_key, timeout=timeout_s, max_retries=0
    )
    try:
        await client.models.list()
    except (openai.APIConnectionError, openai.APITimeoutError):
        raise UserError(
            f"cannot reach the LLM endpoint {endpoint.base_url} of the {endpoint.agent}: "
            f"start the server, or {HOW}"
        ) from None
    except (openai.AuthenticationError, openai.PermissionDeniedError):
        key = endpoint.api_key_env or "ACCELOPT_LLM_API_KEY"
        raise UserError(
            f"the LLM endpoint {endpoint.base_url} refused the API key: check the variable {key}"
        ) from None
    except openai.APIStatusError:
        pass  # it answered: /models may simply not be implemented
    finally:
        await client.close()


async def check_endpoints(endpoints: list[Endpoint], timeout_s: float = 10.0) -> None:
    distinct = {(e.base_url, e.api_key): e for e in endpoints}
    await asyncio.gather(*(_probe(e, timeout_s) for e in distinct.values()))
