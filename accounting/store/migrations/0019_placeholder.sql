-- 0019 is another branch's migration, written in parallel: this empty file keeps the
-- numbering whole (tern refuses a gap) until it lands, and goes when it does.
SELECT 1;
