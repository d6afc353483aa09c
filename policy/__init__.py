"""The gtp-platform Pulumi policy pack (see `policy/README.md`).

A regular package so that `policy.gtp_policy` imports from the repository root and a namespace
package elsewhere on `sys.path` named `policy` (for example `tests/policy`) cannot shadow it.
"""
