"""What every gencoach process runs on: logging, the one retry policy, where Redis is (and
the embedded one), lazy package names, terminal consoles and crash points for tests."""
