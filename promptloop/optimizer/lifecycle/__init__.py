"""The suite lifecycle: health over a prompt lineage, flaky and ambiguous tasks, graduation
of mature buckets into the regression suite, and calibration of judge graders against human
labels.

Computations are pure functions over `RunResult`s and label records; reading the run store,
git and the state folder happens at the edges (`lineage.load_lineage`, `health_io`,
`graduate_git`, `calibration.run_calibration`). Formats are documented in docs/lifecycle.md.
"""
