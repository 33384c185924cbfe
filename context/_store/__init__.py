"""What a session stores beside the graph: side tables, records, receipts, the state folder and
its files, migrations, scrubbing and removal.
"""
