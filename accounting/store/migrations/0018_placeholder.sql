-- 0018 is the project admin API's migration, written on another branch: this empty
-- file keeps the numbering whole until it lands, and goes when it does.
SELECT 1;
