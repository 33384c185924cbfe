"""One render: the renderer and its cascade, layout and checkpoint, backlog, integrity, frames
and the decision it makes.
"""
