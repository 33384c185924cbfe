"""Programs built on OpenProgram: the nested research agent (``research``) and the small
knowledge base it works on (``corpus``)."""
