"""Storage: a location string to a file system and a pins board, the board's layout, moving zips safely."""
