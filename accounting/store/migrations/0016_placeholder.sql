-- 0016 is the console's migration (account labels), written on another branch: this
-- empty file keeps the numbering whole until it lands, and goes when it does.
SELECT 1;
