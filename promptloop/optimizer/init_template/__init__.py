"""The files `promptloop init` writes into a repository (optimizer/workflows/init.py copies
every file of this folder except this one): a commented promptloop.toml, a runnable example
agent that speaks the trial contract with the standard library only, and its suite."""
