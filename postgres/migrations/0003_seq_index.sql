-- 0003: the index by seq, for spent.SeqLister (ListSeq): a node's records
-- in counter order, so that "the last 10,000 of node 7" reads 10,000 index
-- entries per partition at most, not the table.
--
-- On the partitioned table it makes (or adopts) an index on every
-- partition; partition.go's createPartition makes it with each new one.
-- On an existing database this builds the index over every row, inside the
-- migration's transaction, so claims wait until it is built: upgrade at a
-- quiet moment (about a second per million rows, measured on a laptop).

CREATE INDEX records_seq ON records (seq_node, seq_counter);
