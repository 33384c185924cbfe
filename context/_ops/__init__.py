"""Operations on layers (collapse, compact, rollback, expand) and recovery after an overflow."""
