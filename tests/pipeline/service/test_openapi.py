"""Property-based API tests (schemathesis): every generated request gets a response that matches the OpenAPI
spec (status codes, content types, bodies), and no input, however odd, causes a 5xx."""

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from pipeline.retrieval.index import LocalHybridIndex
from pipeline.service.app import ServiceConfig, create_app
from pipeline.service.keys import KeyStore
from pipeline.service.schemas import Limits
from tests.pipeline.conftest import CORPUS, HashEmbedder

TOKEN: dict[str, str] = {}


@pytest.fixture
def api_schema(tmp_path_factory, grader):
    root = tmp_path_factory.mktemp("api")
    store = KeyStore.open(root / "keys.json", create=True)
    TOKEN["a"] = store.create("a", writer=True)  # may also upload, list and delete documents
    index = LocalHybridIndex(root / "idx", embedder=HashEmbedder())
    index.add(CORPUS)
    app = create_app(ServiceConfig(keys=store, retriever=index, grader=grader,
                                   limits=Limits(rate_per_minute=100_000, max_chunks=8)))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


schema = schemathesis.pytest.from_fixture("api_schema")


# a document's bytes are valid when its reader can read them, which no schema can state: every other check holds
CONTENT_CHECKED = {("PUT", "/v1/documents/{name}")}


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_responses_conform_to_the_openapi_spec(case):
    excluded = [positive_data_acceptance] if (case.method, case.path) in CONTENT_CHECKED else []
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN['a']}"}, excluded_checks=excluded)
