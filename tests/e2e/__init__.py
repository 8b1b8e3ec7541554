"""End-to-end tests of issue 24's must-holds: promptloop in repositories that are not its own."""
