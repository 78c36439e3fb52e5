"""Configuration as files: training recipes, search spaces, and the folder they are read from."""
