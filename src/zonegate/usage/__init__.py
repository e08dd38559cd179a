"""Usage accounting: the bytes a node moves, by whom and where, and the record schema the
node writes them in and the Spark job reads (neither side imports the other)."""
