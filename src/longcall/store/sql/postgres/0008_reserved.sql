-- longcall schema 8: a placeholder that leaves the schema as it was. Another branch brings
-- the real migration 8; this one keeps the numbering without gaps until the two are merged.
CREATE TABLE lc_reserved_8 (placeholder INTEGER);
DROP TABLE lc_reserved_8;
