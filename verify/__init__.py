"""The verification engine: what runs a stack without a cloud and says whether it would work.

The offline plan (plan.py: the real program under Pulumi's mocks, recorded by plan_record.py, cached by
plan_cache.py), the rendered cluster (render.py: stack objects + charts + operator manifests), validation against
the schemas and the policy pack (validate.py), the simulation of the controllers and scheduler (simulate/), cost
and the overview diagram (cost.py, overview.py), what a change does (plan_diff.py, replacements.py), and the
scanners (check.py). A layer of its own, above the stages and below the operator CLIs in tools/ (`python -m
tools.plan`, `tools.plan_diff`, `tools.check` are its command lines).
"""
