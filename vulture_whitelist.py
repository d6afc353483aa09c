"""Names vulture (make check's "dead code") reports that are used, by something it cannot see; one reason each.

vulture reads this file as if it were code: a name mentioned here counts as used. Not imported by anything. Anything
else vulture reports is dead: delete it (or, if a framework calls it, add it here with the reason).
"""
# ruff: noqa: B018, F821

# Called or read by a framework, not by our code.
_.forward  # torch.nn.Module.__call__ calls forward (trainer/models.py)
_.benchmark  # torch.backends.cudnn.benchmark: torch reads the flag (trainer/loop.py)
frame  # signal.signal handlers take (signum, frame) (trainer/loop.py)
exc_info  # __exit__(self, *exc_info) of a context manager (trainer/queue.py)
model_config  # pydantic reads a model's model_config (stack_config/schema.py)
_.new_resource  # pulumi.runtime.Mocks.new_resource: Pulumi's mock monitor calls it (verify/plan.py)
_.make_urn  # pulumi.runtime.mocks.MockMonitor.make_urn: its RegisterResource calls it (verify/plan.py)
_.mtime  # tarfile.TarInfo.mtime: tarfile writes it into the member header (tools/engine_base.py)
_.do_GET  # http.server.BaseHTTPRequestHandler dispatches GET to do_GET (tests/simulate/test_prometheus.py)
_.log_message  # BaseHTTPRequestHandler.log_message, overridden to keep test output quiet

# pytest: hooks in conftest.py files, module-level marks, fixtures used by name or autouse.
pytestmark
pytest_collection_modifyitems
pytest_sessionstart
pytest_terminal_summary
config_of_fixture  # tests/gpu/conftest.py: registered under the name `config_of`
assert_golden_fixture  # tests/gpu/conftest.py: registered under the name `assert_golden`
fixed_labels  # tests/image/test_image_supply.py: autouse
prompt  # input()'s parameter in monkeypatched `lambda prompt: ...` (tests/journeys/test_destroy_flows.py)

# Component outputs: part of the component's interface for programs that build on it, not read in this repo.
_.public_subnet_ids  # Network: the public subnets (load balancers), beside private_subnet_ids
