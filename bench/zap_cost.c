/* zap_cost: what one range of a process_madvise(MADV_DONTNEED) call costs, alone and while
 * another thread of the process runs on another CPU (so that every TLB flush is an IPI), for
 * pages installed with UFFDIO_CONTINUE and never written, installed and written, and
 * read-faulted into an unregistered mapping (clean entries): every other page of 4 096, so
 * 2 048 single-page ranges, in calls of 1 024 ranges; 20 repetitions.
 * usage: zap_cost 0|1   (1: with a spinning thread) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/userfaultfd.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define NP 4096
static volatile int stop;
static void *spin(void *a){ (void)a; while(!stop) __asm__ volatile("pause"); return 0; }
int main(int argc,char**argv){
  int threads = argc>1 && atoi(argv[1]);
  pthread_t t; if(threads) pthread_create(&t,0,spin,0);
  int fd=memfd_create("p",0); ftruncate(fd,(long)NP*4096);
  char*canon=mmap(0,(long)NP*4096,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); memset(canon,1,(long)NP*4096);
  int uffd=syscall(SYS_userfaultfd,O_CLOEXEC|O_NONBLOCK|1);
  struct uffdio_api api={.api=UFFD_API,.features=UFFD_FEATURE_SIGBUS|UFFD_FEATURE_MINOR_SHMEM};
  ioctl(uffd,UFFDIO_API,&api);
  int pidfd=syscall(SYS_pidfd_open,getpid(),0);
  double tz[3]={0}; long n[3]={0};
  for(int rep=0;rep<20;rep++) for(int kind=0;kind<3;kind++){
    char*m=mmap(0,(long)NP*4096,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
    volatile char sink=0;
    if(kind<2){
      struct uffdio_register r={.range={(long)m,(long)NP*4096},.mode=UFFDIO_REGISTER_MODE_MINOR};
      ioctl(uffd,UFFDIO_REGISTER,&r);
      for(long p=0;p<NP;p+=2){ struct uffdio_continue c={.range={(long)m+p*4096,4096},.mode=0}; ioctl(uffd,UFFDIO_CONTINUE,&c); if(kind==1) m[p*4096]=2; else sink+=m[p*4096]; }
    } else {
      for(long p=0;p<NP;p+=2) sink+=m[p*4096]; /* read faults: clean PTEs */
    }
    struct iovec iov[1024]; int k=0; double t0=now();
    for(long p=0;p<NP;p+=2){ iov[k].iov_base=m+p*4096; iov[k].iov_len=4096; k++; if(k==1024){ syscall(SYS_process_madvise,pidfd,iov,k,MADV_DONTNEED,0); n[kind]+=k; k=0; } }
    if(k){ syscall(SYS_process_madvise,pidfd,iov,k,MADV_DONTNEED,0); n[kind]+=k; }
    tz[kind]+=now()-t0;
    munmap(m,(long)NP*4096);
  }
  stop=1; if(threads) pthread_join(t,0);
  printf("%s: zap per single-page range: CONTINUE, never written %.0f ns | CONTINUE, written %.0f ns | read-faulted (clean) %.0f ns\n", threads?"with a spinning thread":"one thread", tz[0]*1e9/n[0], tz[1]*1e9/n[1], tz[2]*1e9/n[2]);
}
