/* sqlite: an in-memory SQLite workload with lookaside disabled, so that every small allocation
 * of SQLite reaches malloc. Inserts, an index build, point and range queries, updates, deletes.
 * usage: sqlite ROWS   prints: RESULT rows=<n> */
#include <sqlite3.h>
#include <string.h>
#include "common.h"

static void exec(sqlite3 *db, const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite: %s: %s\n", sql, err ? err : "?");
        exit(4);
    }
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite: prepare %s: %s\n", sql, sqlite3_errmsg(db));
        exit(4);
    }
    return st;
}

int main(int argc, char **argv) {
    long rows = arg_long(argc, argv, 1, 100000);
    sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);
    sqlite3_initialize();
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) return 4;
    sqlite3_db_config(db, SQLITE_DBCONFIG_LOOKASIDE, NULL, 0, 0);
    exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, score REAL, tag TEXT)");
    uint64_t seed = 42;
    exec(db, "BEGIN");
    sqlite3_stmt *ins = prep(db, "INSERT INTO t(id, name, score, tag) VALUES(?, ?, ?, ?)");
    char name[80], tag[16];
    for (long i = 0; i < rows; i++) {
        size_t n = 8 + rng_next(&seed) % 64;
        for (size_t j = 0; j < n; j++) name[j] = (char)('a' + rng_next(&seed) % 26);
        name[n] = 0;
        snprintf(tag, sizeof tag, "tag%llu", (unsigned long long)(rng_next(&seed) % 500));
        sqlite3_bind_int64(ins, 1, i);
        sqlite3_bind_text(ins, 2, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(ins, 3, (double)(rng_next(&seed) % 100000) / 7.0);
        sqlite3_bind_text(ins, 4, tag, -1, SQLITE_TRANSIENT);
        if (sqlite3_step(ins) != SQLITE_DONE) return 4;
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    exec(db, "COMMIT");
    exec(db, "CREATE INDEX t_name ON t(name)");
    exec(db, "CREATE INDEX t_tag ON t(tag, score)");
    sqlite3_stmt *q = prep(db, "SELECT count(*), sum(score) FROM t WHERE tag = ? AND score > ?");
    long found = 0;
    for (long i = 0; i < rows / 10; i++) {
        snprintf(tag, sizeof tag, "tag%llu", (unsigned long long)(rng_next(&seed) % 500));
        sqlite3_bind_text(q, 1, tag, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(q, 2, (double)(rng_next(&seed) % 10000));
        while (sqlite3_step(q) == SQLITE_ROW) found += sqlite3_column_int64(q, 0);
        sqlite3_reset(q);
    }
    sqlite3_finalize(q);
    exec(db, "BEGIN");
    exec(db, "UPDATE t SET name = name || '-x', score = score * 1.5 WHERE id % 3 = 0");
    exec(db, "DELETE FROM t WHERE id % 5 = 0");
    exec(db, "COMMIT");
    sqlite3_stmt *g = prep(db, "SELECT tag, count(*), avg(score), group_concat(substr(name, 1, 4)) FROM t "
                               "GROUP BY tag ORDER BY 2 DESC");
    while (sqlite3_step(g) == SQLITE_ROW) found += sqlite3_column_int64(g, 1);
    sqlite3_finalize(g);
    sqlite3_stmt *s = prep(db, "SELECT name FROM t ORDER BY name LIMIT 1000 OFFSET 100");
    while (sqlite3_step(s) == SQLITE_ROW) found += (long)strlen((const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    sqlite3_close(db);
    printf("RESULT rows=%ld\n", found);
    return 0;
}
