-- longcall schema 18: reserved for a change made alongside schema 19 (numbers are kept
-- without gaps); it changes nothing.
SELECT 1;
