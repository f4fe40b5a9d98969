-- Reserved: a parallel branch's migration takes this number (delete this file on merge).
DROP TABLE IF EXISTS lc_reserved_0018;
