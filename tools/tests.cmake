# CTest entries for the tools (filled below).
