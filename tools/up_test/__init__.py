"""`make up-test`: the real Pulumi CLI and kubernetes provider, built from their Go modules, deploying test stacks
onto the real test cluster (tools/up_test/run.py)."""
