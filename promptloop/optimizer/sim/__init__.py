"""Simulated worlds for the benchmarks and tests (never imported by a production module:
`tests/test_import_contract.py` checks it)."""
